import Foundation
import Glibc
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

// MARK: Helpers

private func suiteFile(_ directory: URL, _ suite: String = "suite") -> URL {
    directory.appendingPathComponent(suite + ".lmdb")
}

private func inode(_ url: URL) throws -> UInt64 {
    var st = stat()
    try #require(stat(url.path, &st) == 0)
    return UInt64(st.st_ino)
}

/// How the last open of `suite` checked the file's structure (the suite is opened for the call).
private func openCheck(_ directory: URL, _ suite: String = "suite") throws -> StructureCheck.Outcome {
    try openSuite(directory, suite).store.environment.openCheck
}

/// Writes `bytes` over the file's own bytes from `offset`, in place: same inode, as a tool that
/// writes into the file (or a restore over it) would, not a new file renamed over it.
private func overwrite(_ url: URL, at offset: Int, with bytes: Data) throws {
    let handle = try FileHandle(forUpdating: url)
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: bytes)
}

/// Damages, in place, the header (the page number) of the B-tree page that holds `marker`.
private func damagePage(holding marker: String, in url: URL, pageSize: Int = 4096) throws -> Data {
    let bytes = try Data(contentsOf: url)
    let found = try #require(bytes.range(of: Data(marker.utf8)), "the marker is not in the file")
    let page = (found.lowerBound - bytes.startIndex) / pageSize
    try overwrite(url, at: page * pageSize, with: Data([bytes[bytes.startIndex + page * pageSize] ^ 0x5A]))
    return try Data(contentsOf: url)
}

private func writeKeys(_ defaults: SharedDefaults, count: Int, marker: String? = nil) throws {
    try defaults.write { tx in
        for i in 0..<count { try tx.set(.string("value number \(i)"), forKey: "key-\(i)") }
        if let marker { try tx.set(.string(marker), forKey: "key-\(count / 2)-victim") }
    }
}

/// Opens the damaged suite in a helper process first (a crash must not take the test runner with
/// it), then here: both must refuse it with `corruptFile`, leaving the file as it is.
private func expectRefused(_ directory: URL, damaged: Data, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let outcome = try await HelperProcess.run("read-all", directory: directory, suite: "suite")
    #expect(outcome.reason == .exit, "the helper crashed (signal \(outcome.status))", sourceLocation: sourceLocation)
    #expect(outcome.status == 3, "status \(outcome.status): \(outcome.stdout) \(outcome.stderr)", sourceLocation: sourceLocation)
    guard outcome.reason == .exit, outcome.status == 3 else { return }
    let error = sharedDefaultsError(sourceLocation: sourceLocation) { _ = try openSuite(directory, "suite") }
    #expect(error?.code == .corruptFile, sourceLocation: sourceLocation)
    #expect(try Data(contentsOf: suiteFile(directory)) == damaged, "the damaged file was rewritten", sourceLocation: sourceLocation)
}

/// Whether this kernel and file system give a file a new change time for every write made after a
/// `stat` of it, however soon (Linux ≥ 6.13's fine-grained time stamps, on ext4, xfs, btrfs, tmpfs):
/// what lets an open notice bytes changed in place right after the file was verified. Probed on a
/// file in the temporary directory.
private let fineGrainedChangeTimes: Bool = {
    let path = NSTemporaryDirectory() + "/GroupDefaultsTests-ctime-\(getpid())"
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return false }
    defer {
        close(fd)
        unlink(path)
    }
    var byte: UInt8 = 1
    for _ in 0..<20 {
        var before = stat()
        var after = stat()
        fstat(fd, &before)
        guard pwrite(fd, &byte, 1, 0) == 1 else { return false }
        fstat(fd, &after)
        if before.st_ctim.tv_sec == after.st_ctim.tv_sec && before.st_ctim.tv_nsec == after.st_ctim.tv_nsec { return false }
    }
    return true
}()

// MARK: Tests

@Suite("Cold open: the verified-state record", .timeLimit(.minutes(2)))
struct VerifiedStateTests {
    @Test("a state the library verified, or reached by its own commits, is not walked again when opened")
    func reusedAcrossOpens() async throws {
        try await withTemporaryDirectory { dir in
            do {
                let defaults = try openSuite(dir, "suite")
                #expect(defaults.store.environment.openCheck == .unchecked)  // a new file: nothing to walk
                try writeKeys(defaults, count: 300)
            }
            // The first write walked every tree and recorded it; the commits since were the library's.
            #expect(try openCheck(dir) == .trusted)
            #expect(try openCheck(dir) == .trusted)
            do {
                let defaults = try openSuite(dir, "suite")
                #expect(defaults.string(forKey: "key-299") == "value number 299")
                defaults.set("ring.caf", forKey: "sound")
                #expect(defaults.lastError == nil)
            }
            // In another process too (the record lives in the sidecar, shared by every process).
            let other = try await HelperProcess.run("read-all", directory: dir, suite: "suite")
            #expect(other.status == 0 && other.stdout == "ok 301 0", "\(other.stdout) \(other.stderr)")
            let defaults = try openSuite(dir, "suite")
            #expect(defaults.store.environment.openCheck == .trusted)
            #expect(defaults.string(forKey: "sound") == "ring.caf")
        }
    }

    @Test("without the sidecar's record the file is walked, and recorded for the next open")
    func missingSidecar() throws {
        try withTemporaryDirectory { dir in
            do { try writeKeys(openSuite(dir, "suite"), count: 50) }
            try FileManager.default.removeItem(at: dir.appendingPathComponent("suite.lmdb-notify"))
            #expect(try openCheck(dir) == .walked)
            #expect(try openCheck(dir) == .trusted)
        }
    }

    @Test("a commit by another LMDB writer makes the next open walk the file")
    func otherWriter() throws {
        try withTemporaryDirectory { dir in
            do { try writeKeys(openSuite(dir, "suite"), count: 50) }
            #expect(try openCheck(dir) == .trusted)
            // A plain LMDB writer on the same file, which knows nothing of the record.
            var options = SharedDefaults.Configuration().environmentOptions(lockFilePath: suiteFile(dir).path + "-notify")
            options.verifiedStateOffset = nil
            let environment = try Environment(path: suiteFile(dir).path, options: options)
            try environment.writeTransaction(sync: false) { txn in
                try Array("other.writer".utf8).withUnsafeBytes { key in
                    try [UInt8(1)].withUnsafeBytes { try txn.put(Database(SuiteDatabase.names.firstIndex(of: "meta")!), key, $0) }
                }
            }
            environment.close()
            #expect(try openCheck(dir) == .walked)
            #expect(try openCheck(dir) == .trusted)
        }
    }

    @Test("a file replaced by another store's file is walked; a damaged one written in place is refused")
    func replacedFile() async throws {
        try await withTemporaryDirectory { dir in
            let marker = "MARKER-31c7-replaced"
            let other = dir.appendingPathComponent("other", isDirectory: true)
            do {
                try writeKeys(openSuite(dir, "suite"), count: 50)
                try writeKeys(openSuite(other, "suite"), count: 400, marker: marker)
            }
            #expect(try openCheck(dir) == .trusted)

            // Copied in as a new file (a new inode), as `cp` to a temporary name and a rename would.
            let copy = dir.appendingPathComponent("copy.tmp")
            try FileManager.default.copyItem(at: suiteFile(other), to: copy)
            #expect(rename(copy.path, suiteFile(dir).path) == 0)
            do {
                let defaults = try openSuite(dir, "suite")
                #expect(defaults.store.environment.openCheck == .walked)
                #expect(defaults.string(forKey: "key-\(200)-victim") == marker)
            }

            // Written over the file in place (same inode), then damaged: refused, never a crash.
            let before = try inode(suiteFile(dir))
            try writeKeys(openSuite(dir, "suite"), count: 10)  // the record now vouches for this state
            #expect(try openCheck(dir) == .trusted)
            let otherBytes = try Data(contentsOf: suiteFile(other))
            try overwrite(suiteFile(dir), at: 0, with: otherBytes)
            let damaged = try damagePage(holding: marker, in: suiteFile(dir))
            #expect(try inode(suiteFile(dir)) == before)
            try await expectRefused(dir, damaged: damaged)
        }
    }

    @Test(
        "a page damaged in place after the file was verified is an error, not a crash",
        .enabled(if: fineGrainedChangeTimes, "needs fine-grained change times (Linux ≥ 6.13): see VerifiedState")
    )
    func damageAfterVerification() async throws {
        try await withTemporaryDirectory { dir in
            let marker = "MARKER-9e2b-after"
            do { try writeKeys(openSuite(dir, "suite"), count: 400, marker: marker) }
            // Verified, and vouched for by the record.
            #expect(try openCheck(dir) == .trusted)
            #expect(try openCheck(dir) == .trusted)
            let before = try inode(suiteFile(dir))
            // Only a data page changes: the meta pages, and so the transaction id and the trees'
            // roots, stay as they were. The file's change time tells the next open.
            let damaged = try damagePage(holding: marker, in: suiteFile(dir))
            #expect(try inode(suiteFile(dir)) == before)
            try await expectRefused(dir, damaged: damaged)
        }
    }

    @Test("verify(fileAt:) walks every page even when the record vouches for the file")
    func verifyIgnoresRecord() throws {
        try withTemporaryDirectory { dir in
            do { try writeKeys(openSuite(dir, "suite"), count: 100) }
            #expect(try openCheck(dir) == .trusted)
            let report = SharedDefaults.verify(fileAt: suiteFile(dir))
            #expect(report.isHealthy)
            #expect(report.checkedKeys == 100)
            let defaults = try SharedDefaults(
                fileURL: suiteFile(dir),
                configuration: {
                    var configuration = SharedDefaults.Configuration()
                    configuration.trustsVerifiedState = false
                    return configuration
                }()
            )
            #expect(defaults.store.environment.openCheck == .walked)
        }
    }
}
