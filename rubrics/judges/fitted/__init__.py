"""The fitted files a judge reads at start-up, and the catalog models that ship them.

    fitted_file.py       the one kind of model-bound fitted file: header, loader, writer, refusal, shipped files
    calibration_file.py  judge-probability calibrations (calibrations/: the catalog models' shipped ones)
    verdict_head.py      trained verdict heads' files (heads/: the catalog models' shipped ones)
    logistic.py          the logit and sigmoid both read with
    judge_models.py      the catalog models' own methods, and where their shipped files lie

rubrics/trust/ fits and writes them; the backends only read them.
"""
