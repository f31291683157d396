// chat-notify: the notification service, another process: reads what the settings screen chose.
import ChatSettingsKeys
import Foundation
import GroupDefaults

do {
    let defaults = try ChatSuite.open()
    print("a new message plays \(defaults[.sound])\(defaults[.showPreview] ? ", with a preview" : "")")
} catch {
    FileHandle.standardError.write(Data("chat-notify: \(error)\n".utf8))
    exit(1)
}
