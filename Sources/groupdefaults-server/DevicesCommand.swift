import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

/// `groupdefaults-server devices list|revoke`, on the same storage a running server uses.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List an account's devices, or revoke one.",
        discussion: """
            A device is a token and a device id (the store's origin) that pushed or pulled; a token \
            made with `token create --device NAME` gives its devices that name. Servers record a \
            device when they first see it on a suite, and its last-seen and last-push times once a \
            second after that (a device holding an event stream open is seen at each heartbeat).

            Example: groupdefaults-server devices list --account ana --config /etc/groupdefaults-server.conf
            """,
        subcommands: [List.self, Revoke.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List an account's devices, most recently seen first: id, name, device id, token, first and last seen, last push, suites.",
            discussion: "Example: groupdefaults-server devices list --account ana --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The account whose devices to list.") var account: String
        @Flag(help: "Print one JSON array.") var json = false

        func run() async throws {
            try await reportingFailure {
                let store = try await storage.openStorage()
                let devices = try await store.devices(account: account)
                let active = try await store.activeTokenIDs(account: account, at: Date())
                // No devices: is there such an account at all? (A look-alike name is told by its code points.)
                var known = !devices.isEmpty
                if !known { known = try await store.accountSummaries().contains { $0.account.isSameName(as: account) } }
                try await store.shutdown()
                let unverified = StoredDevice.unverified(among: devices, activeTokens: active)
                let infos = devices.map { $0.info(current: false, unverified: unverified[$0.identity] != nil) { _ in true } }
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    return output(String(decoding: try encoder.encode(infos), as: UTF8.self))
                }
                if infos.isEmpty {
                    guard known else {
                        return groupdefaultsServer.outputHint(
                            "no devices seen: no account is named \(NewNames.shown(account)) (see `groupdefaults-server accounts list`)"
                        )
                    }
                    return output("account \(printable(account)): no devices seen")
                }
                for (record, device) in zip(devices, infos) {
                    output(
                        [
                            printable(device.id), device.name.map(printable) ?? "(unnamed)", "device \(device.deviceID)", printable(device.tokenID),
                            "first seen \(device.firstSeen)", "last seen \(device.lastSeen)",
                            device.lastPush.map { "last push \($0)" } ?? "never pushed",
                            device.suites.map(printable).joined(separator: ","),
                            unverified[record.identity].map { Self.unverifiedWords($0, deviceID: device.deviceID) } ?? "",
                        ]
                        .filter { !$0.isEmpty }.joined(separator: "\t")
                    )
                }
            }
        }

        /// Why a record is unverified: the earlier record of a live token of another device that
        /// used the id first (`StoredDevice.unverified(among:activeTokens:)`).
        static func unverifiedWords(_ earlier: StoredDevice, deviceID: UInt64) -> String {
            "unverified: token \(printable(earlier.tokenID))" + (earlier.name.map { " (\(printable($0)))" } ?? "")
                + " used device \(deviceID) first and still works"
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a device by its id: its token stops working at its next request, and its event streams end.",
            discussion: """
                This revokes the device's token: every device that shares that token loses access \
                too (they are named). Give each device a token of its own with `token create --device NAME`.

                Example: groupdefaults-server devices revoke dev_3f2a9c01b7e4 --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Argument(help: "The device's id (from `devices list`).") var id: String

        func run() async throws {
            try await reportingFailure {
                let revocation = try await storage.withStorage { store in
                    let revocation = try await store.revokeDevice(id: id, account: nil, at: Date())
                    if case .revoked(let device, _) = revocation {
                        try await store.appendAudit(
                            .commandLine(.deviceRevoke, account: device.account, target: "device \(id) (token \(device.tokenID))")
                        )
                    }
                    return revocation
                }
                switch revocation {
                case .notFound:
                    throw CommandFailure("no device has the id \(id) (see `groupdefaults-server devices list --account ACCOUNT`)")
                case .ambiguous(let matching):
                    throw CommandFailure(
                        "\(matching.count) devices have the id \(id): revoke the token instead "
                            + "(`groupdefaults-server token revoke ID` with ID one of \(matching.map(\.tokenID).joined(separator: ", ")))"
                    )
                case .revoked(let device, let sharing):
                    var line =
                        "revoked \(printable(id))" + (device.name.map { " (\(printable($0)))" } ?? "")
                        + ": its token \(device.tokenID) no longer works"
                    if !sharing.isEmpty {
                        line += "; devices sharing that token lose access too: " + sharing.map(\.id).joined(separator: ", ")
                    }
                    output(line)
                }
            }
        }
    }
}
