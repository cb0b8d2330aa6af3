"""Maps the fixed top-level folders onto one import root, ``kfstack``.

``components/`` becomes ``kfstack.components``, ``pipelines/`` ``kfstack.pipelines`` and
``spark_jobs/`` ``kfstack.spark_jobs`` -- the way kubeflow/pipelines-components maps
``kfp_components.components`` onto its ``components/`` folder. The generic names then never
collide with other installed packages, and every image imports the same dotted paths. The
mapping needs code (pyproject's ``packages.find`` cannot prefix names), hence this file; all
metadata stays in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDER_TO_PACKAGE = {
    "kfstack": "kfstack",
    "components": "kfstack.components",
    "pipelines": "kfstack.pipelines",
    "spark_jobs": "kfstack.spark_jobs",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
# kfstack/components, kfstack/pipelines and kfstack/spark_jobs are symbolic links to the
# top-level folders, so that tools reading the source tree (import-linter, mypy) see the package
# laid out as installed; the folders themselves are what gets packaged, once.
LINKED = [name for name in FOLDER_TO_PACKAGE if name != "kfstack"]
for folder, package in FOLDER_TO_PACKAGE.items():
    package_dir[package] = folder
    packages.append(package)
    excluded = ["tests", "tests.*", "*.tests", "*.tests.*"]
    if folder == "kfstack":
        excluded += [pattern for name in LINKED for pattern in (name, f"{name}.*")]
    for sub in find_packages(folder, exclude=excluded):
        packages.append(f"{package}.{sub}")

# Data files: the node-pool profiles and schemas (YAML, JSON), and the project templates of
# `kfstack init` (every file under kfstack/app/project-template).
package_data = {"": ["*.yaml", "*.json"], "kfstack.app": ["project-template/**/*"]}
setup(packages=packages, package_dir=package_dir, package_data=package_data)
