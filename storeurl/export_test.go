package storeurl

// FilePath returns the path a file: URL names.
var FilePath = filePath
