import Foundation
import GroupDefaultsWire
import Testing

@testable import GroupDefaultsServer

/// The console shows a name or value holding a line break, a tab, an escape sequence or a
/// bidirectional override escaped, as it shows markup escaped (issue 46): rendered through the
/// real templates.
@Suite("The console shows control characters escaped")
struct ConsoleShownTests {
    /// The forged audit record of issue 46, after a name; and the characters a page must not hold.
    static let forged = "\n2026-11-29T04:00:00Z\tadmin-remove\t-\toperator ops\tby command line\u{1B}[2K\u{2028}\u{202E}"
    static let shown = "\\n2026-11-29T04:00:00Z\\tadmin-remove\\t-\\toperator ops\\tby command line\\u{1B}[2K\\u{2028}\\u{202E}"
    static let raw: [Unicode.Scalar] = ["\u{1B}", "\u{2028}", "\u{202E}", "\t"]

    static func chrome(_ title: String) -> PageChrome {
        PageChrome(title: title, operatorName: "ops", csrf: "csrf-token", trail: [Link(text: "ana" + forged, href: "/console/accounts/x")])
    }

    @Test("the audit page: every field of a record escaped, the record one row, the forged one absent")
    func auditPage() {
        let row = AuditPage.Row(
            time: TimeText(Date()),
            act: "invitation-create",
            account: "ana" + Self.forged,
            target: "suite group.x" + Self.forged,
            actor: "token tok_1" + Self.forged,
            source: "127.0.0.1" + Self.forged,
            outcome: "failed" + Self.forged
        )
        let page = AuditPage(page: Self.chrome("Audit log"), account: "ana" + Self.forged, shown: 1, days: 365, records: [row])
        let html = ConsoleTemplates.render(page, "audit")
        for field in ["ana", "suite group.x", "token tok_1", "127.0.0.1", "failed"] {
            #expect(html.contains(field + Self.shown), "\(field)")
        }
        #expect(!html.contains("\n2026-11-29T04:00:00Z"))
        #expect(!html.unicodeScalars.contains { Self.raw.contains($0) })
        #expect(html.components(separatedBy: "<td class=\"act\">").count == 2, "one row")
    }

    @Test("the history page: a key escaped; a value's indented JSON keeps its lines, each escaped")
    func historyPage() {
        let value = "{\n  \"string\" : \"v\\n\u{2028}\u{202E}\"\n}"
        let version = HistoryPage.Version(
            value: value,
            deleted: false,
            writer: "phone" + Self.forged,
            written: TimeText(Date()),
            received: TimeText(Date()),
            rev: 1
        )
        let page = HistoryPage(
            page: Self.chrome("key" + Self.forged),
            account: "ana",
            suite: "s",
            key: "key" + Self.forged,
            versions: [version],
            suiteHref: "/console/accounts/ana/suites/s"
        )
        let html = ConsoleTemplates.render(page, "history")
        #expect(html.contains("key" + Self.shown) && html.contains("phone" + Self.shown))
        #expect(html.contains("<pre>{\n  &quot;string&quot; : &quot;v\\n\\u{2028}\\u{202E}&quot;\n}</pre>"), "\(html)")
        #expect(!html.contains("\n2026-11-29T04:00:00Z"))
        #expect(!html.unicodeScalars.contains { Self.raw.contains($0) })
    }
}
