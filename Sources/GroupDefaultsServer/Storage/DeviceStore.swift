/// The devices that used the server, one record per (token, device id) pair.
package protocol DeviceStore: Sendable {
    /// Records that a device was seen: creates its record, or merges this sighting into it (first
    /// seen: the earlier; last seen and last push: the later; suites: the union).
    func recordDevice(_ sighting: StoredDevice) async throws
    /// The devices of `account` (every account's, for nil), most recently seen first.
    func devices(account: String?) async throws -> [StoredDevice]
}
