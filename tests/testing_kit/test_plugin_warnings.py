"""A user's test run with the plugin shows no warning that oncelog's imports caused.

Regression (issue 29): every user's pytest run that used a fixture ended in
``1 passed, 218 warnings``. Starting ``oncelog_broker`` imports oncelog's codecs, which import
kafka-python, whose ~110 JSON schemas are read with ``importlib.resources.read_text`` -
deprecated since Python 3.11, two DeprecationWarnings per schema. Python hides them; pytest
shows them. The project never saw them because its own pytest config filtered both messages
out. Now ``oncelog.protocol.messages`` silences exactly those two around that import, the
project's config filters nothing, and a user's run - here in a folder with a pytest.ini of its
own, as a user's project is - reports no warning, even with DeprecationWarnings made errors.
"""

from __future__ import annotations

import pytest

USER_TEST = '''
def test_my_service_talks_to_a_broker(oncelog_broker, oncelog_topic):
    assert oncelog_broker.is_running() and oncelog_topic()
'''


@pytest.mark.parametrize("warnings_option", ["default", "error::DeprecationWarning"])
def test_a_users_run_with_the_plugin_reports_no_warning(pytester, run_user_tests,
                                                         warnings_option):
    pytester.makeini("[pytest]\n")  # the user's own (empty) config, not the project's
    result = run_user_tests(USER_TEST, "-W", warnings_option)
    output = result.stdout.str()
    result.assert_outcomes(passed=1, warnings=0)
    assert "warnings summary" not in output and "DeprecationWarning" not in output, output
