"""Front ends that turn other systems' asset reads and writes into catalog task runs, one package
each: dbt (a target folder's artifacts), Kestra (AssetShipper's records and flows' declarations),
Prefect (a server's asset events) and Metaflow (helpers called inside steps)."""
