// Server-Sent Events (the `text/event-stream` format of the HTML standard), as the sync server
// writes its change stream and the sync client reads it. Hummingbird has no SSE helper and
// mattt/EventSource does not build on Linux, hence this small codec, shared by both sides.

/// One event of a stream.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `id:` field (the server's revision); sent back as `Last-Event-ID` to resume.
    public var id: String?
    /// The `event:` field; nil means the default type, "message".
    public var event: String?
    /// The data lines, joined with "\n".
    public var data: String
    /// The `retry:` field: how long a client waits before reconnecting, in milliseconds.
    public var retry: Int?

    /// An event with the given fields; those left nil are not written by `encoded`.
    public init(id: String? = nil, event: String? = nil, data: String, retry: Int? = nil) {
        self.id = id
        self.event = event
        self.data = data
        self.retry = retry
    }

    /// The event as it goes on the wire, ending with the blank line that dispatches it. Line breaks
    /// inside `data` become several `data:` lines; `id` and `event` must not contain any (they are
    /// dropped if they do, as a receiver would misread them).
    public var encoded: String {
        var text = ""
        if let event, !event.containsLineBreak { text += "event: \(event)\n" }
        if let id, !id.containsLineBreak, !id.contains("\0") { text += "id: \(id)\n" }
        if let retry, retry >= 0 { text += "retry: \(retry)\n" }
        for line in data.splitLines() { text += "data: \(line)\n" }
        return text + "\n"
    }

    /// A comment line, which receivers ignore: the heartbeat that keeps idle connections open.
    public static func comment(_ text: String = "") -> String {
        text.splitLines().map { ": \($0)\n" }.joined()
    }
}

/// Reads events from a byte stream as it arrives, in chunks cut anywhere (even inside a UTF-8
/// character or between "\r" and "\n").
///
/// ```swift
/// var parser = ServerSentEventParser()
/// for try await chunk in body { for event in parser.feed(chunk) { … } }
/// ```
/// Follows the standard's parsing rules: lines end with "\r\n", "\n" or "\r"; a leading BOM is
/// skipped; `field: value` with one optional space after the colon; lines starting with ":" are
/// comments; unknown fields are ignored; an event with no data is not dispatched; `id` persists
/// across events (`lastEventID`) and an id containing NUL is ignored; `retry` takes digits only.
public struct ServerSentEventParser: Sendable {
    /// The last `id:` seen, to send as `Last-Event-ID` when reconnecting.
    public private(set) var lastEventID: String?
    /// The last valid `retry:` seen, in milliseconds.
    public private(set) var retry: Int?
    /// How many comment lines (heartbeats) arrived.
    public private(set) var comments = 0

    private var line: [UInt8] = []
    private var lastWasCR = false
    /// How many bytes of a leading BOM (EF BB BF) have been seen; 3 once the start is past.
    private var bomBytes = 0
    private var data: [String] = []
    private var hasData = false
    private var eventType: String?
    private var eventID: String?
    /// A line longer than this (1 MiB) is dropped rather than buffered without end.
    public static let maximumLineLength = 1 << 20
    private var discardingLine = false
    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// A parser at the start of a stream: no bytes, id or retry seen yet.
    public init() {}

    /// Feeds the next chunk of the stream; returns the events it completed.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if bomBytes < 3 {
                if byte == Self.bom[bomBytes] {
                    bomBytes += 1  // a whole BOM is dropped
                    continue
                }
                let consumed = Self.bom.prefix(bomBytes)  // not a BOM after all: those were text
                bomBytes = 3
                for earlier in consumed { take(earlier, into: &events) }
            }
            take(byte, into: &events)
        }
        return events
    }

    private mutating func take(_ byte: UInt8, into events: inout [ServerSentEvent]) {
        switch byte {
        case 0x0A where lastWasCR:
            lastWasCR = false  // the "\n" of "\r\n": the line already ended
        case 0x0A, 0x0D:
            lastWasCR = byte == 0x0D
            if let event = endLine() { events.append(event) }
        default:
            lastWasCR = false
            if discardingLine { return }
            if line.count >= Self.maximumLineLength {
                discardingLine = true
                line.removeAll()
                return
            }
            line.append(byte)
        }
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer {
            line.removeAll(keepingCapacity: true)
            discardingLine = false
        }
        if discardingLine { return nil }
        if line.isEmpty { return dispatch() }
        if line.first == UInt8(ascii: ":") {
            comments += 1
            return nil
        }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = Substring(text)
            value = ""
        }
        switch field {
        case "data":
            data.append(String(value))
            hasData = true
        case "event":
            eventType = String(value)
        case "id":
            if !value.contains("\0") { eventID = String(value) }
        case "retry":
            if !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let milliseconds = Int(value) {
                retry = milliseconds
            }
        default:
            break
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        if let eventID { lastEventID = eventID }
        defer {
            data.removeAll()
            hasData = false
            eventType = nil
            eventID = nil
        }
        guard hasData else { return nil }
        return ServerSentEvent(
            id: lastEventID,
            event: eventType.flatMap { $0.isEmpty ? nil : $0 },
            data: data.joined(separator: "\n"),
            retry: nil
        )
    }
}

extension String {
    fileprivate var containsLineBreak: Bool { contains("\n") || contains("\r") }

    /// The lines of the text, split at "\r\n", "\n" or "\r" (one empty line for empty text).
    fileprivate func splitLines() -> [Substring] {
        var lines: [Substring] = []
        var start = startIndex
        var index = startIndex
        while index < endIndex {
            let character = self[index]
            if character == "\n" || character == "\r" || character == "\r\n" {
                lines.append(self[start..<index])
                start = self.index(after: index)
            }
            index = self.index(after: index)
        }
        lines.append(self[start...])
        return lines
    }
}
