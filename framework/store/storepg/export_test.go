package storepg

// UUIDArg is how the read of a row by its key passes its ID (the rows'
// spelling's UUIDArg).
var UUIDArg = uuidArg
