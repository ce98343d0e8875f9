package provision

// Reload reads the receipt again. A run that waited for the lock must start
// from what the previous holder recorded, or it would lose that run's entries
// when it saves.
func (run *Run) Reload() error {
	rc, b, err := LoadReceipt(run.Root)
	if err != nil {
		return err
	}
	run.Receipt, run.receiptBytes = rc, b
	return nil
}
