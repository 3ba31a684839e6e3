"""Batch vetting: candidates in, the agent over each, every trajectory into a sink.

- `sinks`: the `Sink` protocol and its two implementations, `JsonlSink` (an append-only
  JSONL file) and `StoreSink` (the store, in batches under one agent run);
- `runner`: the run's options (`VetOptions`), reading the inputs, what is still pending
  (resume), the run loop (inline, threads for HTTP backends, a process pool) with its
  failure policy, and the `Stats` it returns;
- `cluster`: the same run on a Ray actor pool (imported only for `--ray`);
- `into_store`: vetting into a store (`vet_into_store`), with the run set-up that makes
  two runs comparable (`run_params`, `rules_model`).

What concerns one candidate (the loop, the tool, the policies, the readers) lives in
`agent`; the `vet` command's flags and messages in `commands.vet`.
"""
