import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `DeviceStore` (devices), over every backend.
    @Suite("DeviceStore")
    struct DeviceStoreConformance: StorageConformance {
        @Test(
            "devices: sightings merge (first seen, last seen, last push, suites, name); listed per account, most recent first",
            arguments: StorageBackend.allCases
        )
        func devices(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                func sighting(
                    account: String = "alice",
                    token: String = "t1",
                    name: String? = "phone",
                    device: UInt64 = 1,
                    at time: UInt64,
                    push: Bool = false,
                    suite: String = "a"
                ) -> StoredDevice {
                    StoredDevice(
                        account: account,
                        tokenID: token,
                        name: name,
                        deviceID: device,
                        firstSeen: time,
                        lastSeen: time,
                        lastPush: push ? time : nil,
                        suites: [suite]
                    )
                }
                try await storage.recordDevice(sighting(at: 2000, suite: "b"))
                try await storage.recordDevice(sighting(at: 1000, push: true, suite: "a"))  // arrives late: merged, not replacing
                try await storage.recordDevice(sighting(at: 3000))
                try await storage.recordDevice(sighting(name: nil, device: UInt64.max, at: 4000))  // another device, same token
                try await storage.recordDevice(sighting(account: "bob", token: "t2", name: "tablet", at: 5000, push: true))

                let alice = try await storage.devices(account: "alice")
                #expect(alice.map(\.deviceID) == [UInt64.max, 1], "most recently seen first")
                let phone = try #require(alice.last)
                #expect(
                    phone
                        == StoredDevice(
                            account: "alice",
                            tokenID: "t1",
                            name: "phone",
                            deviceID: 1,
                            firstSeen: 1000,
                            lastSeen: 3000,
                            lastPush: 1000,
                            suites: ["a", "b"]
                        )
                )
                #expect(phone.id == StoredDevice.id(account: "alice", tokenID: "t1", deviceID: 1))
                #expect(alice.first?.name == nil)
                #expect(alice.first?.id != phone.id)
                #expect(try await storage.devices(account: "bob").map(\.name) == ["tablet"])
                #expect(try await storage.devices(account: "carol").isEmpty)
                #expect(try await storage.devices(account: nil).count == 3)
            }
        }
    }
}
