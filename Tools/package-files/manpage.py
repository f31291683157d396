#!/usr/bin/env python3
"""Writes a man page (roff, section 1) from a tool's `--experimental-dump-help` JSON on stdin.

Usage: TOOL --experimental-dump-help | manpage.py DATE > TOOL.1

swift-argument-parser's own generator is a package plugin that builds every product of the
package again (a second full release build, about ten minutes on two cores, beside the one that
packages the tools with their Swift runtime linked in); this renders the same description the
plugin reads, from the binaries being packaged.
"""
import json
import sys


def esc(text):
    """Text as roff reads it: backslashes and leading dots or quotes escaped."""
    text = (text or "").replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith(".") or line.startswith("'"):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def synopsis_of(argument):
    names = argument.get("names") or []
    long = [n for n in names if n["kind"] == "long"]
    short = [n for n in names if n["kind"] == "short"]
    name = ("--" + long[0]["name"]) if long else ("-" + short[0]["name"]) if short else None
    value = argument.get("valueName") or "value"
    if argument["kind"] == "positional":
        text = "<" + value + ">"
    elif argument["kind"] == "flag":
        text = name
    else:
        text = name + " <" + value + ">"
    if argument.get("isRepeating"):
        text += " ..."
    return "[" + text + "]" if argument.get("isOptional") else text


def label_of(argument):
    names = argument.get("names") or []
    parts = [("--" if n["kind"] == "long" else "-") + n["name"] for n in names
             if n["kind"] in ("long", "short", "longWithSingleDash")]
    value = argument.get("valueName") or "value"
    if argument["kind"] == "positional":
        return "<" + value + ">"
    if argument["kind"] == "option":
        return ", ".join(parts) + " <" + value + ">"
    return ", ".join(parts)


def visible(items):
    return [i for i in items or [] if i.get("shouldDisplay", True)]


def arguments_section(command, out):
    for argument in visible(command.get("arguments")):
        if any(n["name"] in ("help",) for n in argument.get("names") or []):
            continue
        out.append(".TP")
        out.append("\\fB" + esc(label_of(argument)) + "\\fR")
        text = argument.get("abstract") or ""
        if argument.get("defaultValue") not in (None, ""):
            text += " (default: " + argument["defaultValue"] + ")"
        if argument.get("allValues"):
            text += " (values: " + ", ".join(argument["allValues"]) + ")"
        out.append(esc(text))


def command_section(command, path, out):
    out.append(".SS " + esc(" ".join(path)))
    usage = " ".join(path + [synopsis_of(a) for a in visible(command.get("arguments"))
                             if not any(n["name"] == "help" for n in a.get("names") or [])])
    out.append(".B " + esc(usage))
    out.append(".PP")
    out.append(esc(command.get("abstract", "")))
    if command.get("discussion"):
        out.append(".PP")
        out.append(esc(command["discussion"]))
    arguments_section(command, out)
    for sub in visible(command.get("subcommands")):
        if sub["commandName"] != "help":
            command_section(sub, path + [sub["commandName"]], out)


def main():
    date = sys.argv[1] if len(sys.argv) > 1 else ""
    root = json.load(sys.stdin)["command"]
    name = root["commandName"]
    out = ['.TH "%s" 1 "%s" "GroupDefaults" "User Commands"' % (name.upper(), date)]
    out.append(".SH NAME")
    out.append(esc(name) + " \\- " + esc(root.get("abstract", "")))
    out.append(".SH SYNOPSIS")
    subs = [s for s in visible(root.get("subcommands")) if s["commandName"] != "help"]
    if subs:
        out.append(".B " + esc(name) + "\n" + esc(" | ".join(s["commandName"] for s in subs)) + " [options]")
    else:
        out.append(".B " + esc(" ".join([name] + [synopsis_of(a) for a in visible(root.get("arguments"))])))
    out.append(".SH DESCRIPTION")
    out.append(esc(root.get("abstract", "")))
    if root.get("discussion"):
        out.append(".PP")
        out.append(esc(root["discussion"]))
    if [a for a in visible(root.get("arguments")) if not any(n["name"] == "help" for n in a.get("names") or [])]:
        out.append(".SH OPTIONS")
        arguments_section(root, out)
    if subs:
        out.append(".SH COMMANDS")
        for sub in subs:
            command_section(sub, [name, sub["commandName"]], out)
    extra = sys.argv[2] if len(sys.argv) > 2 else ""
    if extra:
        sections_from(extra, out)
    out.append(".SH SEE ALSO")
    others = [t for t in ("groupdefaults", "groupdefaults-sync", "groupdefaults-server") if t != name]
    out.append(", ".join("\\fB%s\\fR(1)" % t for t in others))
    print("\n".join(out))


def sections_from(path, out):
    """Appends the sections of a text file: a line `## TITLE` starts a section, blank lines
    separate paragraphs, and a line starting with two spaces is shown as it is."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    verbatim = False
    for line in lines:
        if line.startswith("## "):
            out.append(".SH " + esc(line[3:].upper()))
            verbatim = False
        elif not line.strip():
            if verbatim:
                out.append(".fi")
                verbatim = False
            out.append(".PP")
        elif line.startswith("  "):
            if not verbatim:
                out.append(".nf")
                verbatim = True
            out.append(esc(line))
        else:
            if verbatim:
                out.append(".fi")
                verbatim = False
            out.append(esc(line))
    if verbatim:
        out.append(".fi")


if __name__ == "__main__":
    main()
