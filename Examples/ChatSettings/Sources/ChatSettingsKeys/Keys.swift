import Foundation
public import GroupDefaults

/// The chat app's shared settings: one suite, typed keys.
extension SharedDefaults.Keys {
    /// The sound a new message plays.
    public static let sound = SharedDefaults.Key<String>("sound", default: "default.caf")
    /// Whether notifications show a preview of the message.
    public static let showPreview = SharedDefaults.Key<Bool>("show-preview", default: true)
}

/// The app group both executables use.
public enum ChatSuite {
    /// The suite's name.
    public static let name = "group.com.example.chat"

    /// The suite, in `$CHAT_SETTINGS_DIR` when set (the example's run uses a temporary folder).
    public static func open() throws -> SharedDefaults {
        let directory = ProcessInfo.processInfo.environment["CHAT_SETTINGS_DIR"].map { URL(fileURLWithPath: $0, isDirectory: true) }
        return try SharedDefaults(suiteName: name, directory: directory)
    }
}
