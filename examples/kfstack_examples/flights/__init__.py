"""The flights example: the delay model's raw-to-feature derivation (:mod:`.features`, :mod:`.scoring`,
:mod:`.feature_spec`), its Spark feature job (:mod:`.features_job`), training code
(:mod:`.training`), custom predictor (:mod:`.predictor`) and pipelines (:mod:`.pipelines`)."""
