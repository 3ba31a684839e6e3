"""The workflow layer between the app (and the commands) and the store.

In the order a campaign runs: `intake` brings candidates and earlier labels in, `vetting`
runs the agent over them, `queue` hands the uncertain ones to experts, `review` says what
each decision means (`drafts` holds what an expert set before deciding), `audit` measures
the agent and the experts, `learning` refits the inspector from their labels, and `export`
turns decisions into training data, VI files and catalogues. `authoring` holds the experts'
own trajectories, `team` the accounts and settings, `reads` all that the app reads.
"""
