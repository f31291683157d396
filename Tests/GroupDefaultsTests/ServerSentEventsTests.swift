import GroupDefaultsWire
import Testing

@testable import GroupDefaults

@Suite("Server-Sent Events codec")
struct ServerSentEventsTests {
    private func parse(_ chunks: [String]) -> (events: [ServerSentEvent], parser: ServerSentEventParser) {
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        for chunk in chunks { events += parser.feed(Array(chunk.utf8)) }
        return (events, parser)
    }

    @Test("an encoded event reads back the same, multi-line data included")
    func roundTrip() {
        let events = [
            ServerSentEvent(id: "42", event: "change", data: #"{"key":"sound"}"#),
            ServerSentEvent(id: "43", data: "line one\nline two\r\nline three"),
            ServerSentEvent(data: ""),
        ]
        let wire = events.map(\.encoded).joined()
        let (read, parser) = parse([wire])
        #expect(read.map(\.data) == [#"{"key":"sound"}"#, "line one\nline two\nline three", ""])
        #expect(read.map(\.event) == ["change", nil, nil])
        #expect(read.map(\.id) == ["42", "43", "43"], "an event without id: keeps the last one")
        #expect(parser.lastEventID == "43")
    }

    @Test("chunks cut anywhere, even between \\r and \\n or inside a UTF-8 character, give the same events")
    func anyChunking() {
        let wire = "id: 1\r\ndata: ringtone é🎵\r\n\r\n: heartbeat\r\nid: 2\rdata: b\r\r"
        let whole = parse([wire]).events
        #expect(whole.map(\.data) == ["ringtone é🎵", "b"])
        let bytes = Array(wire.utf8)
        for cut in 1..<bytes.count {
            var parser = ServerSentEventParser()
            let events = parser.feed(bytes[..<cut]) + parser.feed(bytes[cut...])
            #expect(events == whole, "cut at \(cut)")
            #expect(parser.comments == 1)
        }
    }

    @Test("the standard's parsing rules: BOM, comments, one optional space, unknown fields, no data no event, retry digits, NUL ids")
    func parsingRules() {
        let wire =
            "\u{FEFF}: comment\n"
            + "data:no space\n\n"
            + "data:  two spaces\n\n"
            + "event: ignored-without-data\nid: 7\n\n"
            + "unknown: x\nfield-without-colon\ndata\n\n"
            + "retry: 1500\nretry: 2x\nid: bad\u{0}id\ndata: last\n\n"
            + "data: never dispatched"
        let (events, parser) = parse([wire])
        #expect(events.map(\.data) == ["no space", " two spaces", "", "last"])
        #expect(events.map(\.id) == [nil, nil, "7", "7"], "an id with NUL is ignored; an event with no data still sets the id")
        #expect(parser.retry == 1500)
        #expect(parser.comments == 1)
        #expect(parser.lastEventID == "7")
    }

    @Test("a BOM split across chunks is dropped; bytes that only look like its start are kept")
    func splitBOM() {
        var parser = ServerSentEventParser()
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        var events = parser.feed(bom.prefix(1)) + parser.feed(bom.dropFirst())
        events += parser.feed(Array("data: x\n\n".utf8))
        #expect(events.map(\.data) == ["x"])
        var other = ServerSentEventParser()
        // 0xEF alone is the start of a BOM that does not follow: it stays, and makes "data" an unknown field.
        #expect(other.feed([0xEF] + Array("data: y\n\n".utf8) + Array("data: z\n\n".utf8)).map(\.data) == ["z"])
    }

    @Test("a line longer than the limit is dropped, and the stream goes on")
    func overlongLine() {
        var parser = ServerSentEventParser()
        let long = "data: " + String(repeating: "x", count: ServerSentEventParser.maximumLineLength + 10) + "\n"
        let events = parser.feed(Array(long.utf8)) + parser.feed(Array("\ndata: ok\n\n".utf8))
        #expect(events.map(\.data) == ["ok"])
    }

    @Test("encoding drops an id or event name with a line break (it would be misread) and writes comments line by line")
    func encodingGuards() {
        #expect(ServerSentEvent(id: "1\n2", event: "a\rb", data: "d").encoded == "data: d\n\n")
        #expect(ServerSentEvent(id: "9", data: "d", retry: 3000).encoded == "id: 9\nretry: 3000\ndata: d\n\n")
        #expect(ServerSentEvent.comment() == ": \n")
        #expect(ServerSentEvent.comment("a\nb") == ": a\n: b\n")
    }
}
