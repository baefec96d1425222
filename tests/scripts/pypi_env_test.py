#!/usr/bin/env python3
"""scripts/pypi-env.sh, the cache of the project's environments from PyPI, with real venvs and
pip, offline: the requirement installs setuptools from the wheels Debian's python3-venv ships
(/usr/share/python-wheels, --no-index), so no registry is asked.

Run by ctest (tests/scripts/CMakeLists.txt) as: pypi_env_test.py <source dir>.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.getcwd()
SCRIPT = os.path.join(SOURCE, "scripts", "pypi-env.sh")
WHEELS = "/usr/share/python-wheels"
OFFLINE = ["--no-index", "--find-links", WHEELS]


class PypiEnvTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pypi-env-test.")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.cache = os.path.join(self.tmp, "cache")

    def bash(self, command, *args):
        env = dict(os.environ, DDPRUN_CACHE_DIR=self.cache)
        return subprocess.run(["bash", "-c", f'. "{SCRIPT}"; {command}', "bash", *args],
                              env=env, capture_output=True, text=True, timeout=300)

    def pypi_env(self, link, *requirements):
        return self.bash('pypi_env "$@"', link, "test", "/usr/bin/python3", *requirements)

    def env_path(self, *requirements):
        out = self.bash('pypi_env_path "$@"', "test", "/usr/bin/python3", *requirements)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def test_makes_the_environment_once_and_links_every_checkout_to_it(self):
        first, second = os.path.join(self.tmp, "a", ".venv", "x"), os.path.join(self.tmp, "b", "x")
        made = self.pypi_env(first, *OFFLINE, "setuptools")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertIn("making", made.stdout)
        env = self.env_path(*OFFLINE, "setuptools")
        self.assertTrue(env.startswith(os.path.join(self.cache, "venvs", "test-")), env)
        self.assertEqual(os.readlink(first), env)
        self.assertTrue(os.path.isfile(os.path.join(env, ".ddprun-complete")))
        check = subprocess.run([os.path.join(first, "bin", "python"), "-c", "import setuptools"],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stderr)

        reused = self.pypi_env(second, *OFFLINE, "setuptools")
        self.assertEqual(reused.returncode, 0, reused.stderr)
        self.assertNotIn("making", reused.stdout)
        self.assertEqual(os.readlink(second), env)

    def test_other_requirements_get_an_environment_of_their_own(self):
        self.assertNotEqual(self.env_path(*OFFLINE, "setuptools"),
                            self.env_path(*OFFLINE, "setuptools<70"))

    def test_an_interrupted_install_is_made_again_and_an_old_link_replaced(self):
        env = self.env_path(*OFFLINE, "setuptools")
        os.makedirs(os.path.join(env, "bin"))  # no marker: pip never finished here
        link = os.path.join(self.tmp, "x")
        os.symlink(os.path.join(self.tmp, "elsewhere"), link)  # a link to another pin
        made = self.pypi_env(link, *OFFLINE, "setuptools")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertIn("making", made.stdout)
        self.assertEqual(os.readlink(link), env)
        self.assertTrue(os.path.isfile(os.path.join(env, ".ddprun-complete")))

    def test_a_failed_install_says_so_and_leaves_no_environment(self):
        link = os.path.join(self.tmp, "x")
        requirement = "ddprun-no-such-package==1.0"
        failed = self.pypi_env(link, *OFFLINE, requirement)
        self.assertNotEqual(failed.returncode, 0)
        self.assertIn("pip could not install", failed.stderr)
        self.assertIn(requirement, failed.stderr)
        self.assertFalse(os.path.exists(self.env_path(*OFFLINE, requirement)))
        self.assertFalse(os.path.lexists(link))


if __name__ == "__main__":
    unittest.main()
