import Foundation
import TestSupport
import Testing

@testable import GroupDefaults

/// Calls in places LMDB does not allow them: each is a clear error or works, never a hang or a crash.
@Suite("Nested and misplaced calls", .timeLimit(.minutes(1)))
struct MisuseTests {
    @Test("a getter inside read { } joins the read")
    func readInsideRead() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "nest", directory: dir)
            defaults.set("ring.caf", forKey: "sound")
            let inner = try defaults.read { _ in defaults.string(forKey: "sound") }
            #expect(inner == "ring.caf")
            #expect(defaults.lastError == nil)
        }
    }

    @Test("a write inside read { } on the same thread is refused, without deadlock, even when the map must grow")
    func writeInsideRead() throws {
        try withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.initialMapSize = 64 << 10
            let defaults = try SharedDefaults(suiteName: "nest", directory: dir, configuration: configuration)
            let big = Data(repeating: 7, count: 512 << 10)  // needs the map to grow
            try defaults.read { _ in defaults.set(big, forKey: "big") }
            #expect(defaults.lastError?.code == .transactionMisuse)
            #expect(defaults.data(forKey: "big") == nil)
            defaults.set(big, forKey: "big")  // outside the read it works
            #expect(defaults.data(forKey: "big") == big)
        }
    }

    @Test("a transaction kept past its closure refuses to be used")
    func keptTransaction() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "kept", directory: dir)
            let kept = try defaults.write { $0 }
            #expect(throws: SharedDefaultsError.self) { try kept.set(.integer(1), forKey: "x") }
            do {
                try kept.set(.integer(1), forKey: "x")
            } catch let error as SharedDefaultsError {
                #expect(error.code == .transactionMisuse)
            }
            try defaults.write { tx in try tx.set(.integer(2), forKey: "y") }  // a later write is not disturbed
            #expect(defaults.object(forKey: "x") == nil)
            #expect(defaults.integer(forKey: "y") == 2)
        }
    }

    @Test("a transaction kept past its closure still refuses after the setters' writes, which renew a transaction of their own")
    func keptTransactionAfterSetters() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "kept", directory: dir)
            defaults.set("ring.caf", forKey: "sound")
            let kept = try defaults.write { $0 }
            defaults.set(1, forKey: "a")
            defaults.removeObject(forKey: "sound")
            try defaults.update("a") { _ in .integer(2) }
            defaults.set("chime.caf", forKey: "sound")
            #expect(throws: SharedDefaultsError.self) { try kept.set(.integer(1), forKey: "x") }
            #expect(defaults.object(forKey: "x") == nil)
            #expect(defaults.integer(forKey: "a") == 2)
            #expect(defaults.string(forKey: "sound") == "chime.caf")
            #expect(defaults.lastError == nil)
        }
    }

    @Test("a feed whose cursor is past the end of the log (the suite was recreated) gets a reset")
    func cursorPastTheEnd() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "past", directory: dir)
            defaults.set(1, forKey: "a")
            let feed = try defaults.changeFeed(since: 1000)
            let reset = try #require(try feed.nextAvailable())
            let end = try defaults.lastSequence
            #expect(reset.kind == .reset && reset.sequence == end)
        }
    }

    @Test("a notification handler may end the last observation and write, without deadlock or crash")
    func handlerEndsLastObservation() async throws {
        try await withTemporaryDirectory { dir in
            let handled = AsyncStream<Void>.makeStream()
            final class Holder: @unchecked Sendable {  // touched by the handler only, then read after it ran
                var feed: SharedDefaults.ChangeFeed?
                var defaults: SharedDefaults?
            }
            let holder = Holder()
            holder.defaults = try SharedDefaults(suiteName: "handler", directory: dir)
            holder.feed = try holder.defaults!.changeFeed()
            let observer = NotificationCenter.default.addObserver(
                forName: SharedDefaults.didChangeNotification,
                object: nil,
                queue: nil
            ) { notification in
                guard notification.userInfo?[SharedDefaults.ChangeNotificationKey.suiteName] as? String == "handler",
                    let defaults = holder.defaults
                else { return }
                defaults.set("from the handler", forKey: "reply")  // a write on the signal's thread
                holder.feed = nil  // the last observation ends on the signal's thread
                holder.defaults = nil  // and the last handle
                handled.continuation.yield()
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            let writer = try await HelperProcess.run("set", directory: dir, suite: "handler", ["sound", "ring.caf"])
            #expect(writer.status == 0, "\(writer.stderr)")
            var iterator = handled.stream.makeAsyncIterator()
            await iterator.next()
            let reopened = try SharedDefaults(suiteName: "handler", directory: dir)
            #expect(reopened.string(forKey: "reply") == "from the handler")
        }
    }
}
