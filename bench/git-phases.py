#!/usr/bin/python3
"""Where a git push or fetch through the bridge spends its time (bench/run, make bench).

git-phases.py AUDIT_LOG SKIP_FETCH SKIP_PUSH [REPO]

Reads the daemon's "git-phases" audit records (bridge/op-git.c: milliseconds since the
request started at which each phase ended: spawn, start, mirror, hook, policy, upstream,
end, answered, warm, done), drops the first SKIP_FETCH upload-pack and SKIP_PUSH receive-pack calls
(clones and warm-up), and prints two lines (for the calls whose argv names REPO, when
given), "push" and "fetch", each with the median
length of every phase in ms:

  jail        request → shimbridge-git runs (policy, scratch dir, injector, jailed spawn)
  mirror      mirror locked and refreshed from upstream (the pre-fetch)
  receive     push: the sandbox's pack received into the mirror's quarantine, hook started
  policy      push: the git policy's checks
  upstream    push: the accepted update pushed upstream through the injector
  serve       receive-pack finishing / upload-pack serving the sandbox
  finish      shimbridge-git gone → the call's output drained and audited; for a push
              answered early (the mirror warmed after it), receive-pack gone → the
              sandbox's EXIT sent
and the total, request → the sandbox's EXIT. A push answered early adds "then warm N
of M" (pushes that warmed the mirror after their answer, the median of that fetch).
"""

import json
import statistics
import sys


def main():
    log, skip_fetch, skip_push = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    repo = sys.argv[4] if len(sys.argv) > 4 else None
    calls = {"git-upload-pack": [], "git-receive-pack": []}
    with open(log, encoding="utf-8") as f:
        for line in f:
            if '"git-phases"' not in line:
                continue
            rec = json.loads(line)
            argv = rec.get("argv") or ["?"]
            if repo is not None and not any(repo in str(a) for a in argv[1:]):
                continue
            svc = argv[0]
            if svc in calls:
                calls[svc].append(rec.get("ms", {}))
    calls["git-upload-pack"] = calls["git-upload-pack"][skip_fetch:]
    calls["git-receive-pack"] = calls["git-receive-pack"][skip_push:]
    spans = {
        "git-receive-pack": [("jail", None, "start"), ("mirror", "start", "mirror"),
                             ("receive", "mirror", "hook"), ("policy", "hook", "policy"),
                             ("upstream", "policy", "upstream"), ("serve", "upstream", "end"),
                             ("finish", "end", "answered|done")],
        "git-upload-pack": [("jail", None, "start"), ("mirror", "start", "mirror"),
                            ("serve", "mirror", "end"), ("finish", "end", "done")],
    }
    for svc, name in (("git-receive-pack", "push"), ("git-upload-pack", "fetch")):
        out = []
        for label, a, b in spans[svc]:
            vals = [end(m, b) - (m[a] if a else 0) for m in calls[svc]
                    if end(m, b) is not None and (a is None or a in m)]
            if vals:
                out.append("%s %.1f" % (label, statistics.median(vals)))
        totals = [end(m, "answered|done") for m in calls[svc] if "done" in m]
        if not totals:
            print("%s n/a" % name)
            continue
        warm = [m["warm"] - m["answered"] for m in calls[svc] if "warm" in m and "answered" in m]
        after = "; then warm %d of %d, %.1f ms" % (len(warm), len(totals), statistics.median(warm)) \
            if warm else ""
        print("%s %s; total %.1f ms (%d calls)%s" % (name, ", ".join(out),
                                                     statistics.median(totals), len(totals), after))


def end(m, names):
    """The first of the |-separated phases that m has, or None."""
    for n in names.split("|"):
        if n in m:
            return m[n]
    return None


if __name__ == "__main__":
    main()
