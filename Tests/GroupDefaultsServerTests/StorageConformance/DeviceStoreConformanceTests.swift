import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `DeviceStore` (devices), over every backend.
    @Suite("DeviceStore")
    struct DeviceStoreConformance: StorageConformance {
        /// A sighting of `device` with `token` at `time`, under the token's account and device name
        /// (`account` names another; `named: false` leaves the name out).
        func sighting(
            _ token: StoredToken,
            account: String? = nil,
            named: Bool = true,
            device: UInt64,
            at time: UInt64,
            push: Bool = false,
            suite: String = "a"
        ) -> StoredDevice {
            StoredDevice(
                account: account ?? token.account,
                tokenID: token.id,
                name: named ? token.device : nil,
                deviceID: device,
                firstSeen: time,
                lastSeen: time,
                lastPush: push ? time : nil,
                suites: [suite]
            )
        }

        @Test(
            "devices: sightings merge (first seen, last seen, last push, suites, name); listed per account, most recent first",
            arguments: StorageBackend.allCases
        )
        func devices(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let t1 = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil).stored
                let t2 = Tokens.make(account: "bob", suitePatterns: ["*"], readOnly: false, device: "tablet", expires: nil).stored
                try await storage.createToken(t1)
                try await storage.createToken(t2)
                try await storage.recordDevice(sighting(t1, device: 1, at: 2000, suite: "b"))
                try await storage.recordDevice(sighting(t1, device: 1, at: 1000, push: true, suite: "a"))  // arrives late: merged, not replacing
                try await storage.recordDevice(sighting(t1, device: 1, at: 3000))
                try await storage.recordDevice(sighting(t1, named: false, device: UInt64.max, at: 4000))  // another device, same token
                try await storage.recordDevice(sighting(t2, device: 1, at: 5000, push: true))

                let alice = try await storage.devices(account: "alice")
                #expect(alice.map(\.deviceID) == [UInt64.max, 1], "most recently seen first")
                let phone = try #require(alice.last)
                #expect(
                    phone
                        == StoredDevice(
                            account: "alice",
                            tokenID: t1.id,
                            name: "phone",
                            deviceID: 1,
                            firstSeen: 1000,
                            lastSeen: 3000,
                            lastPush: 1000,
                            suites: ["a", "b"]
                        )
                )
                #expect(phone.id == StoredDevice.id(account: "alice", tokenID: t1.id, deviceID: 1))
                #expect(alice.first?.name == nil)
                #expect(alice.first?.id != phone.id)
                #expect(try await storage.devices(account: "bob").map(\.name) == ["tablet"])
                #expect(try await storage.devices(account: "carol").isEmpty)
                #expect(try await storage.devices(account: nil).count == 3)
            }
        }

        @Test(
            "sightings written together are each merged as if written alone; one of a token that is gone, or under a look-alike account, is left out",
            arguments: StorageBackend.allCases
        )
        func batch(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let alice = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil).stored
                let kim = Tokens.make(account: "Kim", suitePatterns: ["*"], readOnly: false, device: nil, expires: nil).stored
                let gone = Tokens.make(account: "carol", suitePatterns: ["*"], readOnly: false, device: nil, expires: nil).stored
                for token in [alice, kim, gone] { try await storage.createToken(token) }
                #expect(try await storage.deleteAccount("carol", audit: nil))
                try await storage.recordDevice(sighting(alice, device: 1, at: 1000, suite: "a"))
                try await storage.recordDevices([
                    sighting(alice, device: 1, at: 3000, push: true, suite: "b"),
                    sighting(alice, device: UInt64.max, at: 2000, suite: "caf\u{E9}"),
                    sighting(kim, device: 7, at: 2500, suite: "a"),
                    sighting(kim, account: "\u{212A}im", device: 8, at: 2500, suite: "a"),  // KELVIN SIGN: not Kim's token
                    sighting(gone, device: 9, at: 2500, suite: "a"),
                ])
                let devices = try await storage.devices(account: nil)
                #expect(devices.map(\.deviceID) == [1, 7, UInt64.max], "most recently seen first")
                #expect(
                    devices.first
                        == StoredDevice(
                            account: "alice",
                            tokenID: alice.id,
                            name: "phone",
                            deviceID: 1,
                            firstSeen: 1000,
                            lastSeen: 3000,
                            lastPush: 3000,
                            suites: ["a", "b"]
                        )
                )
                #expect(devices.last?.suites == ["caf\u{E9}"] && devices.last?.suites.first?.utf8.count == 5, "names keep their bytes")
                #expect(devices[1].account == "Kim" && devices[1].account.utf8.first == UInt8(ascii: "K"))
            }
        }

        @Test(
            "a sighting flushed after its account was deleted, or under another account's name, is not recorded: no device is listed whose token is gone (long-run postgres seed 4106)",
            arguments: StorageBackend.allCases
        )
        func sightingOfADeletedAccount(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let old = Tokens.make(account: "Kim", suitePatterns: ["*"], readOnly: false, device: "d3", expires: nil).stored
                try await storage.createToken(old)
                #expect(try await storage.deleteAccount("Kim", audit: nil))
                // The name made again: a new token; the old token's sighting arrives late.
                let new = Tokens.make(account: "Kim", suitePatterns: ["*"], readOnly: false, device: "d3", expires: nil).stored
                try await storage.createToken(new)
                try await storage.recordDevice(sighting(old, device: 3, at: 1000))
                // A look-alike name (KELVIN SIGN) is another account: the token is not its.
                try await storage.recordDevice(sighting(new, account: "\u{212A}im", device: 3, at: 1000))
                #expect(try await storage.devices(account: nil).isEmpty)
                try await storage.recordDevice(sighting(new, device: 3, at: 1000))
                let listed = try await storage.devices(account: nil)
                #expect(listed.map(\.tokenID) == [new.id])
                // Every listed device can be revoked.
                guard case .revoked = try await storage.revokeDevice(id: try #require(listed.first).id, account: "Kim", at: Date()) else {
                    Issue.record("the listed device could not be revoked")
                    return
                }
            }
        }
    }
}
