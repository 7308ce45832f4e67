module github.com/rnic/rnic

go 1.26
