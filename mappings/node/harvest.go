package node

// harvester pages through a Lister store and registers what it finds.
type harvester struct{}

// stopHarvest stops the background harvest, if any, and waits for its pass.
func (n *Node) stopHarvest() {}
