/// The devices that used the server, one record per (token, device id) pair.
package protocol DeviceStore: Sendable {
    /// Records, in one write, that devices were seen: creates each one's record, or merges its
    /// sighting into it (first seen: the earlier; last seen and last push: the later; suites: the
    /// union). A sighting whose token is gone, or is another account's, is not recorded. At most
    /// one sighting per device (`StoredDevice.Identity`).
    func recordDevices(_ sightings: [StoredDevice]) async throws
    /// The devices of `account` (every account's, for nil), most recently seen first.
    func devices(account: String?) async throws -> [StoredDevice]
}

extension DeviceStore {
    /// `recordDevices` of one sighting.
    package func recordDevice(_ sighting: StoredDevice) async throws {
        try await recordDevices([sighting])
    }
}
