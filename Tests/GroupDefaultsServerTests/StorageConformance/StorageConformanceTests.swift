import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

/// One test body per behaviour of each storage protocol (`ServerStorage.swift` and the protocols it
/// names), run against every backend: one suite per protocol, in `StorageConformance/`.
// Two minutes a test: each PostgreSQL case makes a database of its own, and the suite's cases
// start together, so on two cores the last of some sixty `CREATE DATABASE` waits its turn for
// most of a minute before its test, which takes about a second, begins.
@Suite("Storage conformance", .timeLimit(.minutes(2)))
enum StorageConformanceTests {
    static let roomy = SuiteQuota(maxKeys: 10_000, maxBytes: 16 << 20)
    static let now = "2026-11-22T10:00:00.000Z"
}

/// What the conformance suites share: the quota and server time of their pushes, and helpers.
protocol StorageConformance {}

extension StorageConformance {
    static var roomy: SuiteQuota { StorageConformanceTests.roomy }
    static var now: String { StorageConformanceTests.now }

    func op(_ key: String, _ value: PropertyListValue?, hlc: UInt64) -> PushOp {
        PushOp(key: key, value: value, hlc: HLC(rawValue: hlc))
    }

    @discardableResult
    func push(
        _ storage: some SyncStore,
        account: String = "alice",
        suite: String = "s",
        device: UInt64 = 1,
        batch: String = UUID().uuidString,
        quota: SuiteQuota = StorageConformanceTests.roomy,
        _ ops: [PushOp]
    ) async throws -> PushResponse {
        try await storage.push(
            account: account,
            suite: suite,
            request: PushRequest(deviceID: device, batchID: batch, ops: ops),
            quota: quota,
            serverTime: StorageConformanceTests.now
        )
    }

    func expectStorageError(
        _ code: SyncStorageError.Code,
        _ body: () async throws -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            try await body()
            Issue.record("expected \(code.rawValue), got success", sourceLocation: sourceLocation)
        } catch let error as SyncStorageError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
        }
    }
}
