package import Foundation

/// Every child process of the tests is started through here, one at a time.
///
/// A full run of the server and sync tests crashed twice inside Foundation's `Process.run()` (a
/// read past the end of a mapping in its `memcpy`, at the same point both times) while dozens of
/// tests were starting processes at once; the same tests alone passed. The cause inside Foundation
/// is not found; launches take milliseconds, so they are serialized rather than raced.
package enum ProcessLaunch {
    private static let lock = NSLock()

    /// Starts `process`, while no other test starts one.
    package static func run(_ process: Process) throws {
        try lock.withLock { try process.run() }
    }
}
