// swift-tools-version:6.0
// A chat app's settings, as an app developer would use GroupDefaults: a settings tool and a
// notification helper (two executables) share one suite, and the settings tool syncs it with a
// server in-process. It depends on this repository by path; from elsewhere the line is
//     .package(url: "https://github.com/<owner>/GroupDefaults.git", from: "0.3.0")
// and the products are named with `package: "groupdefaults"`.
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name, whatever the clone is called.
let groupDefaults = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
let identity = groupDefaults.lastPathComponent.lowercased()

let package = Package(
    name: "ChatSettings",
    dependencies: [
        .package(path: groupDefaults.path)
    ],
    targets: [
        .target(name: "ChatSettingsKeys", dependencies: [.product(name: "GroupDefaults", package: identity)]),
        .executableTarget(
            name: "chat-settings",
            dependencies: [
                "ChatSettingsKeys",
                .product(name: "GroupDefaults", package: identity),
                .product(name: "GroupDefaultsSync", package: identity),
            ]
        ),
        .executableTarget(
            name: "chat-notify",
            dependencies: [
                "ChatSettingsKeys",
                .product(name: "GroupDefaults", package: identity),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
