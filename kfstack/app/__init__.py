"""The application shell: the ``kfstack`` command line and the embedded (kfp.local) runner."""
