"""The names of the safety matrix, in report order (tools read them from results.json)."""

STRATEGIES = ["module", "module-fence", "module-sync-replicas", "lua", "redis-py", "redlock-3"]
FAULTS = [
    "none",
    "client-pause",
    "net-delay",
    "net-drop",
    "failover-lost-writes",
    "restart-no-persistence",
    "restart-aof",
    "redlock-split",
    "clock-jump",
    "clock-skew",
    "clock-behind-failover",
    "nemesis",
]
