package import Foundation

/// A machine booted again, as far as a process can tell: the launcher (`LAUNCHER… PROGRAM ARGS…`)
/// of processes that run in a mount namespace of their own with a new boot id bound over
/// `/proc/sys/kernel/random/boot_id` (root only, as the tests run). Every process started with one
/// launcher sees the same boot; a new `Reboot` is the next boot.
package struct Reboot: Sendable {
    /// The launcher's arguments.
    package let launcher: [String]

    /// A new boot, its id kept in a file in `directory`.
    package init(in directory: URL) throws {
        let bootFile = directory.appendingPathComponent("boot_id-\(UUID().uuidString)")
        try Data((UUID().uuidString.lowercased() + "\n").utf8).write(to: bootFile)
        launcher = [
            "/usr/bin/unshare", "-m", "/bin/sh", "-c",
            #"mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@""#, bootFile.path,
        ]
    }
}
