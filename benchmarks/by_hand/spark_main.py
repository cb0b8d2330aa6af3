"""spark-submit's main file for an application that is a module: ``spark-submit ... spark_main.py
<module> [args...]`` runs ``<module>`` as ``__main__`` with ``sys.argv == [<module>, *args]``, as
``python -m <module>`` would (spark-submit itself takes a file, not a module name).

Run as a file by spark-submit; imports nothing of kfstack.
"""

import os
import runpy
import sys

if __name__ == "__main__":
    # As python -m: the working directory first on sys.path, not this file's folder.
    sys.path[0] = os.getcwd()
    module, arguments = sys.argv[1], sys.argv[2:]
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
