package inbox

import "errors"

// ErrNoMessageID is returned by [Inbox.Process] for an empty consumer name
// or message ID.
var ErrNoMessageID = errors.New("inbox: consumer and message ID are required")
