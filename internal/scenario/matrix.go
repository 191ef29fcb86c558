package scenario

// MatrixRow is one version's cells across the scenarios, in All's order;
// a scenario that does not apply to the version has a nil cell.
type MatrixRow struct {
	Lock  string
	Cells []*Cell
}

// Matrix arranges cells as versions (in the given order) by scenarios,
// leaving out versions no cell is about.
func Matrix(cells []Cell, locks []string) []MatrixRow {
	var rows []MatrixRow
	for _, lock := range locks {
		row := MatrixRow{Lock: lock, Cells: make([]*Cell, len(All))}
		found := false
		for i, s := range All {
			for j := range cells {
				if cells[j].Scenario == s.Name && cells[j].Lock == lock {
					row.Cells[i], found = &cells[j], true
				}
			}
		}
		if found {
			rows = append(rows, row)
		}
	}
	return rows
}
