import Foundation
import GroupDefaultsWire
import Mustache

// What the console's templates show, as plain values: every string here is text, escaped by the
// templates (`{{…}}`, never `{{{…}}}`), so a key or value holding markup is shown as markup; and
// each is handed to the templates through `printable` (`ConsoleShown`), so a name or value holding
// a line break, a tab, an escape sequence or a bidirectional override is shown escaped too.

/// A page or a row of one whose text the templates read through `printable`: the templates ask
/// `child(named:)` for each field (instead of reading it by reflection) and get its text escaped.
protocol ConsoleShown: MustacheParent {
    /// The fields that hold text of several lines (a value as indented JSON): each line goes
    /// through `printable` and the line breaks between them stay.
    static var multilineFields: Set<String> { get }
}

extension ConsoleShown {
    static var multilineFields: Set<String> { [] }

    func child(named name: String) -> Any? {
        guard let field = Mirror(reflecting: self).children.first(where: { $0.label == name })?.value else { return nil }
        // An optional field: its value, or nil (the template's section is then left out).
        let mirror = Mirror(reflecting: field)
        let value: Any
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return nil }
            value = wrapped
        } else {
            value = field
        }
        guard let text = value as? String else { return value }
        return Self.multilineFields.contains(name) ? ConsoleFormat.printableLines(text) : printable(text)
    }
}

extension PageChrome: ConsoleShown {}
extension Link: ConsoleShown {}
extension SignInPage: ConsoleShown {}
extension ErrorPage: ConsoleShown {}
extension OverviewPage: ConsoleShown {}
extension OverviewPage.Account: ConsoleShown {}
extension AccountPage: ConsoleShown {}
extension AccountPage.Suite: ConsoleShown {}
extension AccountPage.Token: ConsoleShown {}
extension AccountPage.Device: ConsoleShown {}
extension SuitePage: ConsoleShown {}
extension SuitePage.Key: ConsoleShown { static var multilineFields: Set<String> { ["value"] } }
extension SuitePage.Member: ConsoleShown {}
extension SuitePage.Invitation: ConsoleShown {}
extension AuditPage: ConsoleShown {}
extension AuditPage.Row: ConsoleShown {}
extension HistoryPage: ConsoleShown {}
extension HistoryPage.Version: ConsoleShown { static var multilineFields: Set<String> { ["value"] } }

/// What every page's header and footer need.
struct PageChrome {
    var title: String
    /// The signed-in operator, or nil on the sign-in page.
    var operatorName: String?
    /// The session's form token, or the sign-in form's.
    var csrf: String
    /// Breadcrumbs before the title: (text, href).
    var trail: [Link] = []
}

/// A link: text and an href built by `ConsolePaths`.
struct Link {
    var text: String
    var href: String
}

/// A time as `<time datetime="…">…</time>` shows it.
struct TimeText {
    /// ISO 8601 with milliseconds, UTC.
    var iso: String
    /// For people: "2026-11-25 17:40:12 UTC".
    var text: String

    /// The time to the second, or with `showingMilliseconds` to the millisecond ("2026-11-25
    /// 17:40:12.345 UTC": writes and receipts, which the API stamps to the millisecond).
    init(milliseconds: UInt64, showingMilliseconds: Bool = false) {
        iso = TypedJSONDate.format(milliseconds: milliseconds)
        let date = Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000)
        text = Self.formatter.string(from: date) + (showingMilliseconds ? String(format: ".%03d", Int(milliseconds % 1000)) : "") + " UTC"
    }

    init(_ date: Date) { self.init(milliseconds: UInt64(max(0, date.timeIntervalSince1970 * 1000))) }

    private static var formatter: DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter
    }
}

/// Paths of the console's pages, each name percent-encoded as one path segment.
enum ConsolePaths {
    static let root = "/console"
    static let signIn = "/console/sign-in"
    static let signOut = "/console/sign-out"
    static let audit = "/console/audit"

    static func account(_ account: String) -> String { "/console/accounts/\(segment(account))" }
    static func suite(_ account: String, _ suite: String) -> String { self.account(account) + "/suites/\(segment(suite))" }
    static func removeMember(_ account: String, _ suite: String, member: String) -> String {
        self.suite(account, suite) + "/members/\(segment(member))/remove"
    }
    static func history(_ account: String, _ suite: String, key: String) -> String {
        self.suite(account, suite) + "/history?key=" + query(key)
    }
    static func tail(_ account: String, _ suite: String) -> String { self.suite(account, suite) + "/tail" }
    /// The audit log's page before `before` (nil: the latest), of `account` if given.
    static func audit(before: Date?, account: String?) -> String {
        let query = [before.flatMap(TypedJSONDate.format).map { "before=" + self.query($0) }, account.map { "account=" + self.query($0) }]
        let given = query.compactMap { $0 }
        return given.isEmpty ? audit : audit + "?" + given.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func segment(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
    static func query(_ text: String) -> String { segment(text) }
}

/// How values and writers are shown.
enum ConsoleFormat {
    /// A value as pretty typed JSON (`{"string": "ring.caf"}`), "sealed, N bytes" for an
    /// end-to-end encrypted entry, "deleted" for a tombstone.
    static func value(of entry: SyncEntry) -> String {
        if let sealed = entry.sealed { return "sealed, \(sealed.box.count) bytes" + (entry.isDeleted ? " (deleted)" : "") }
        guard let value = entry.value else { return "deleted" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "(a value that does not encode)"
    }

    /// Text of several lines (a value as indented JSON) as the console shows it: each line through
    /// `printable`, the line breaks between them kept.
    static func printableLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { printable(String($0)) }.joined(separator: "\n")
    }

    /// The name of the device whose store has `origin`: its bound name, else "device <origin>".
    static func writer(origin: UInt64, devices: [StoredDevice]) -> String {
        let named = devices.filter { $0.deviceID == origin }.max { $0.lastSeen < $1.lastSeen }
        return named?.name.map { "\($0) (\(origin))" } ?? "device \(origin)"
    }

    /// "1.2 KiB", "3 B".
    static func bytes(_ count: Int) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1024 * 1024 { return String(format: "%.1f KiB", Double(count) / 1024) }
        return String(format: "%.1f MiB", Double(count) / 1024 / 1024)
    }
}

/// A small line chart drawn by the server as inline SVG (numbers only: nothing to escape).
struct Chart {
    var id: String
    var label: String
    /// The polyline's points in a 300 × 60 box.
    var points: String
    var maximum: Int
    var latest: Int

    /// A chart of `values`, oldest first; `latest` is the figure it gives for now (the last value
    /// unless given).
    init(id: String, label: String, values: [Int], latest: Int? = nil) {
        self.id = id
        self.label = label
        maximum = values.max() ?? 0
        self.latest = latest ?? values.last ?? 0
        let scale = Double(max(maximum, 1))
        let step = values.count > 1 ? 300.0 / Double(values.count - 1) : 0
        points = values.enumerated().map { index, value in
            let x = (Double(index) * step * 10).rounded() / 10
            let y = (58 - Double(value) / scale * 54).rounded()
            return "\(x),\(Int(y))"
        }.joined(separator: " ")
    }
}

// MARK: Pages

struct SignInPage {
    var page: PageChrome
    var name: String
    var error: String?
}

struct ErrorPage {
    var page: PageChrome
    var status: Int
    var message: String
}

struct OverviewPage {
    struct Account {
        var name: String
        var href: String
        var suites: Int
        var keys: Int
        var bytes: String
        var devicesToday: Int
        var activeTokens: Int
    }

    struct Health {
        var backend: String
        var checks: [StorageHealth.Check]
        var ok: Bool
    }

    var page: PageChrome
    var accounts: [Account]
    var accountCount: Int
    var suites: Int
    var keys: Int
    var bytes: String
    var devicesToday: Int
    var openStreams: Int
    var health: Health
    var pushesChart: Chart
    var streamsChart: Chart
}

struct AccountPage {
    struct Suite {
        var name: String
        var href: String
        var keys: Int
        var maxKeys: Int
        var bytes: String
        var byteCount: Int
        var maxBytes: Int
        var maxBytesText: String
        var headRev: UInt64
    }

    struct Token {
        var id: String
        var device: String?
        var patterns: String
        var readOnly: Bool
        var created: TimeText
        var expires: TimeText?
        var revoked: TimeText?
        var revokeHref: String
    }

    struct Device {
        var id: String
        var name: String
        var deviceID: String
        var tokenID: String
        var firstSeen: TimeText
        var lastSeen: TimeText
        var lastPush: TimeText?
        var suites: String
        var revoked: Bool
        var revokeHref: String
    }

    var page: PageChrome
    var account: String
    var suites: [Suite]
    var tokens: [Token]
    var devices: [Device]
    var newToken: String?
    /// This server's URL as the browser reached it, for the new token's `configure` line.
    var serverURL: String
    var message: String?
    var createHref: String
}

struct SuitePage {
    struct Key {
        var key: String
        var historyHref: String
        var value: String
        var deleted: Bool
        var writer: String
        var written: TimeText
        var rev: UInt64
    }

    var page: PageChrome
    var account: String
    var suite: String
    var href: String
    var filter: String
    var keys: [Key]
    var shown: Int
    var total: Int
    var truncated: Bool
    /// The suite holds nothing (no key matched is the filter's doing otherwise). Stored: templates
    /// see stored properties only.
    var holdsNoKeys: Bool
    var tailHref: String
    var headRev: UInt64
    /// Who shares the suite: its members (the owner is `account`), each with a form that removes it.
    struct Member {
        var account: String
        var href: String
        var role: String
        var added: TimeText
        var removeAction: String
    }

    var accountHref: String
    var members: [Member]
    var invitations: [Invitation]
    /// The keys pinned for the members (key ids in an end-to-end encrypted suite).
    var pinned: [String]
    var hasPins: Bool
    var isShared: Bool
    var hasInvitations: Bool
    /// What the last act on the page did (a removal), if the page follows one.
    var message: String?
    /// The key rotation due after a removal from an encrypted suite, in words; nil when none is.
    var rotationDue: String?

    /// An invitation of the suite, as the sharing section lists it.
    struct Invitation {
        var id: String
        var role: String
        var state: String
        var createdBy: String
        var acceptedBy: String
        var expires: TimeText
    }
}

/// The audit log page: the latest administrative acts, newest first.
struct AuditPage {
    struct Row {
        var time: TimeText
        var act: String
        var account: String
        var target: String
        var actor: String
        var source: String
        var outcome: String
    }

    var page: PageChrome
    var account: String?
    var shown: Int
    var days: Int64
    var records: [Row]
    /// The page's bound when it is not the latest (`?before=`), as shown.
    var before: String?
    /// The links to the page of earlier records, if there are any, and to the latest.
    var earlier: String?
    var latest: String?
}

struct HistoryPage {
    struct Version {
        var value: String
        var deleted: Bool
        var writer: String
        var written: TimeText
        var received: TimeText
        var rev: UInt64
    }

    var page: PageChrome
    var account: String
    var suite: String
    var key: String
    var versions: [Version]
    var suiteHref: String
}
