"""Front ends that turn other systems' asset reads and writes into catalog task runs."""
