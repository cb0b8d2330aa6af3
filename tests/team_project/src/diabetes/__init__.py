"""A team's diabetes-progression regressor, as a team writes one before it meets kfstack: a PySpark
data step taking ``--input/--output``, an argparse PyTorch DDP trainer ``main(argv=None, *,
data_dir, model_dir)`` with dash-style options, and a ``kserve.Model`` serving its ONNX export.
None of it imports kfstack; kfstack runs each as it is.

The data are scikit-learn's bundled diabetes set (442 patients, ten baseline measurements, a
quantitative measure of progression one year later), read from the scikit-learn installation:
nothing is downloaded.
"""

# The measurements, in the order the model takes them (scikit-learn's names), and the label.
FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
LABEL = "target"
