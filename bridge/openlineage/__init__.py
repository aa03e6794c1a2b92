"""OpenLineage: conversion (pure), serialization and validation."""
