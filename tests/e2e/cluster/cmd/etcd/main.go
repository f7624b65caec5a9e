// Command etcd is the stock etcd server (same as go.etcd.io/etcd/v3's main),
// built from the go.etcd.io/etcd/server/v3 version pinned in ../../go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
