#!/usr/bin/env python3
"""Fails naming every ctest entry without a TIMEOUT property (ctest's default is 25 minutes, so
one hang would eat a CI job). Usage: check_timeouts.py <ctest> <build dir>."""
import json
import subprocess
import sys


def main():
    ctest, build = sys.argv[1], sys.argv[2]
    listing = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"],
                             capture_output=True, text=True, check=True).stdout
    tests = json.loads(listing)["tests"]
    # The gtest cases are listed only once their discovery ran: a short list checks nothing.
    if len(tests) < 100:
        print(f"only {len(tests)} ctest entries listed: the gtest cases are missing")
        return 1
    missing = [t["name"] for t in tests
               if not any(p["name"] == "TIMEOUT" for p in t.get("properties", []))]
    for name in missing:
        print(f"no TIMEOUT: {name}")
    print(f"{len(tests) - len(missing)} of {len(tests)} ctest entries have a timeout")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
