"""notify: a failure handler. Copy it into your workflows folder and add one line to a script,
`@ys.workflow(on_failure="notify")` (or `# ys: on_failure=notify` in a shell script), or
`on_failure = "notify"` in `<config>/config.toml` for every workflow.

It tells you what failed: with `YS_NOTIFY_URL` set in the daemon's environment it POSTs its
params as JSON to that URL (a webhook: Slack, ntfy, healthchecks); otherwise a desktop
notification, `notify-send` on Linux (libnotify: `apt install libnotify-bin`) or `osascript` on
macOS. Standard library only. Sending is one step with retries, so a webhook that is down
for a minute still gets the message, and a notification that was sent is never sent again.
"""

import json
import os
import shutil
import subprocess
import sys
import urllib.request

import ys


@ys.workflow
def main(step: ys.Step, params: dict):
    return step.run("send", send, params, retry=ys.Retry(max_attempts=5, interval=5.0))


def summary(params: dict) -> tuple[str, str]:
    """A title and a line for a person."""
    if "schedule" in params:
        return (f"ys: schedule {params['schedule']} skipped a slot",
                f"slot {params.get('slot')} did not run ({params.get('reason')})")
    error = params.get("error") or {}
    return (f"ys: {params.get('workflow')} failed",
            f"{params.get('execution_id')}: {error.get('name')}: {error.get('message')}")


def send(params: dict) -> dict:
    url = os.environ.get("YS_NOTIFY_URL")
    if url:
        request = urllib.request.Request(
            url, data=json.dumps(params).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the user's URL
            return {"sent": "webhook", "status": response.status}
    title, line = summary(params)
    if sys.platform == "darwin":
        script = f"display notification {json.dumps(line)} with title {json.dumps(title)}"
        subprocess.run(["osascript", "-e", script], check=True)
        return {"sent": "osascript"}
    if shutil.which("notify-send"):
        subprocess.run(["notify-send", "--app-name=ys", title, line], check=True)
        return {"sent": "notify-send"}
    print(f"{title}: {line} (no notify-send here and no YS_NOTIFY_URL set)", file=sys.stderr)
    return {"sent": None}
