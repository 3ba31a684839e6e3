"""Measuring the agent and the experts: the random audit of confident verdicts and its
estimates (purity, completeness, ECE, each with its interval), and agreement between
experts, gold labels and the agent.

- `sample` draws the audit and reads its estimates from the store;
- `estimate` turns per-stratum counts into figures with exact intervals;
- `agreement` holds the kappas, gold accuracy, confusion and reliability over plain values.
"""
