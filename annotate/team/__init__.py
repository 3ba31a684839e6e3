"""The team: expert accounts (`experts`) and the campaign settings every expert works under
(`settings`: overlap, gold and audit rates, the learning schedule, leases)."""
