"""The worker process: one delivery of one execution (docs/design.md, "Processes").

    delivery.py   the delivery: load the script, run the workflow, report its outcome
                  (`python -m ys.worker`; `--check FILE` is the registry's load check)
    forkserver.py the fork server the warm launcher forks each Python delivery from
                  (`python -m ys.worker.forkserver FD`)
    channel.py    the worker's end of its channel to the daemon (ys/daemon/channel.py: the other)
    codecache.py  workflow scripts compiled once per version
    wire.py       the launch and the fork server's lines, as the daemon writes them

Kept empty of imports: `import ys.worker.channel` costs only what it names.
"""
