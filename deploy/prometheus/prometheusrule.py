#!/usr/bin/env python3
"""Prints the rules of deploy/prometheus/rules as one Prometheus Operator PrometheusRule,
for clusters where the ServiceMonitor's Prometheus takes its rules from such objects:

  python3 deploy/prometheus/prometheusrule.py [--name fuserank] [--label release=prom] \
      | kubectl apply -n fuserank -f -

--label adds a metadata label (repeatable): the Prometheus resource's ruleSelector must
match the object's labels. Needs python3-yaml.
"""

import argparse
import glob
import os
import sys

import yaml

RULES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")


def prometheus_rule(name, labels):
    groups = []
    for path in sorted(glob.glob(os.path.join(RULES_DIR, "*.yml"))):
        with open(path, encoding="utf-8") as f:
            groups.extend(yaml.safe_load(f)["groups"])
    metadata = {"name": name, "labels": {"app.kubernetes.io/name": "fuserank", **labels}}
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": metadata, "spec": {"groups": groups}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="fuserank")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    labels = {}
    for item in args.label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--label wants KEY=VALUE, got {item!r}")
        labels[key] = value
    yaml.safe_dump(prometheus_rule(args.name, labels), sys.stdout, sort_keys=False, width=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
