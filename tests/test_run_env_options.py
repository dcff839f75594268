"""The run environment options (docs/workflows.md "Run environment"): parsed and checked as
the registry reads them; the env_file syntax (the memory limit's mechanism:
tests/test_memory_cgroups.py)."""

from __future__ import annotations

import pytest

from ys import runenv
from ys.daemon.scripts import options_error, parse_header, parse_options, split_options


def test_a_header_and_a_decorator_set_the_run_environment(tmp_path):
    env = tmp_path / "backup.env"
    env.write_text("A=1\n")
    _, options = split_options(
        parse_header([f"# ys: cwd={tmp_path} nice=10 memory_max=256M env_file={env}\n"])
    )
    parsed = parse_options(options)
    assert (parsed.cwd, parsed.nice, parsed.memory_max) == (str(tmp_path), 10, 256 << 20)
    assert parsed.env_file == str(env)
    assert parse_options({"nice": 5, "memory_max": "1G"}).memory_max == 1 << 30
    assert parse_options({}).memory_max is None and parse_options({}).cwd is None


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"memory_max": "lots"}, "bad memory_max"),
        ({"memory_max": "0M"}, "bad memory_max"),
        ({"nice": 25}, "bad nice"),
        ({"nice": "-1"}, "bad nice"),
        ({"env_file": "/no/such/file.env"}, "bad env_file"),
        ({"env_file": "relative.env"}, "bad env_file"),
        ({"cwd": "/etc/hostname"}, "bad cwd"),
        ({"cwd": "srv"}, "bad cwd"),
    ],
)
def test_a_bad_run_environment_option_is_refused_naming_it(options, why):
    error = options_error(options)
    assert error is not None and why in error, error


def test_sizes_are_powers_of_1024_as_systemds():
    assert runenv.parse_size("64M") == 64 << 20
    assert runenv.parse_size("2g") == 2 << 30
    assert runenv.parse_size("512K") == 512 << 10
    assert runenv.parse_size("1048576") == 1 << 20


def test_an_env_file_is_read_as_systemds_environment_file(tmp_path):
    f = tmp_path / "e.env"
    f.write_text(
        '# a comment\n; another\n\nA=1\nexport B = two words \nC="quoted # not a comment"\n'
        "D='single'\nnot a line\n9BAD=x\nE=a=b\n"
    )
    assert runenv.read_env_file(str(f)) == {
        "A": "1",
        "B": "two words",
        "C": "quoted # not a comment",
        "D": "single",
        "E": "a=b",
    }
