/// Text as a tool prints it in a line: every control character (`NameKind.isControl`: line
/// breaks, ESC and the rest of C0 and C1, line and paragraph separators, bidirectional overrides)
/// written as a Swift escape (`\n`, `\u{1B}`), so that a name or a value can neither print as
/// another line nor move the cursor, recolour or reorder what the terminal shows. Everything else
/// is kept as it is. JSON output needs none of this: its encoder escapes.
///
/// ```swift
/// printable("x\n2026-11-29\tforged")   // "x\\n2026-11-29\\tforged"
/// ```
public func printable(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: NameKind.isControl) else { return text }
    var out = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
        if NameKind.isControl(scalar) {
            out.append(contentsOf: scalar.escaped(asASCII: true).unicodeScalars)
        } else {
            out.append(scalar)
        }
    }
    return String(out)
}
