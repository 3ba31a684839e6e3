"""Learning from the experts: the inspector's model fitted from their labels, the evidence
that decides how far it is trusted, its versions, the schedule that refits it while experts
work, the re-scoring of pending verdicts, and a model run's calibration.

- `fit` gathers the labels and fits a task's model (`launch.py calibrate`);
- `models` holds the model kinds, each shrinking towards the plain rules;
- `evidence` decides, from out-of-fold predictions grouped by object, what the labels support;
- `versions` reads the fitted versions back (the learning curve, what a proposal would flip);
- `schedule` refits in a separate process after every `learn_every` new labels;
- `rescore` re-scores pending verdicts from their stored inputs;
- `run_calibration` calibrates another model run's P(YES) on the same labels.
"""
