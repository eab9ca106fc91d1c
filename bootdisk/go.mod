module github.com/dockerios/dockerios/bootdisk

go 1.26.8

require github.com/dockerios/dockerios v0.0.0

require howett.net/plist v1.0.1

replace github.com/dockerios/dockerios => ../
