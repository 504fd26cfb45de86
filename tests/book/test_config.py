"""The configuration the book relies on (Jupyter Book silently ignores misspelled keys)."""

import json
from pathlib import Path

import jupyter_book
import yaml

from tools import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
_JB = Path(jupyter_book.__file__).parent
DEFAULTS = yaml.safe_load((_JB / "default_config.yml").read_text())
# the schema knows a few top-level keys the defaults leave out (e.g. bibtex_bibfiles)
DEFAULTS.update(
    {
        k: None
        for k in json.loads((_JB / "config_schema.json").read_text())["properties"]
        if k not in DEFAULTS
    }
)
# Keys a project may add that Jupyter Book's defaults do not list.
EXTRA_ALLOWED = {("sphinx", "recursive_update"), ("sphinx", "local_extensions"), ("course",)}


def _unknown_keys(config, defaults, prefix=()):
    for key, value in config.items():
        path = prefix + (key,)
        if any(path[: len(a)] == a for a in EXTRA_ALLOWED):
            continue
        if not isinstance(defaults, dict) or key not in defaults:
            yield ".".join(map(str, path))
        elif (
            isinstance(value, dict)
            and path != ("sphinx", "config")
            and isinstance(defaults[key], dict)
        ):
            yield from _unknown_keys(value, defaults[key], path)


def test_config_has_no_unknown_keys():
    unknown = list(_unknown_keys(CONFIG, DEFAULTS))
    assert not unknown, f"_config.yml keys Jupyter Book does not know (misspelled?): {unknown}"


def test_build_fails_loudly_and_executes_with_cache():
    assert CONFIG["execute"]["execute_notebooks"] == "cache"
    assert CONFIG["execute"]["allow_errors"] is False
    # in an empty folder, as on Colab (the fresh-Colab check relies on the build's execution)
    assert CONFIG["execute"]["run_in_temp"] is True
    assert CONFIG["sphinx"]["config"]["nb_execution_raise_on_error"] is True
    assert CONFIG["only_build_toc_files"] is True


def test_repository_and_colab_are_configured_once():
    url = CONFIG["repository"]["url"]
    assert url.startswith("https://github.com/") and CONFIG["repository"]["branch"]
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    # no second copy of the URL that could drift
    text = (ROOT / "_config.yml").read_text()
    assert text.count(url) == 1, "the repository URL must appear once in _config.yml"


def test_single_search_bar():
    assert CONFIG["sphinx"]["config"]["html_theme_options"]["navbar_persistent"] == []


def test_no_static_folder_injecting_scripts():
    # any _static/ folder next to the config gets every .js in it injected into every page
    assert not (ROOT / "_static").exists() and not (ROOT / "book" / "_static").exists()


def test_requirements_pin_the_known_stack():
    reqs = {
        line.split("==")[0].strip().lower(): line.split("==")[1].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    assert reqs["torch"] == "2.13.0"
    assert reqs["jupyter-book"] == "1.0.4.post1"
    assert reqs["nbval"] == "0.11.0"
