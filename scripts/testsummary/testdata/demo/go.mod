module example.com/demo

go 1.25
