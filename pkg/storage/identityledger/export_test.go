/*
Copyright The DockerIOS Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package identityledger

// RememberedClass is what the class view remembers of class (nil if
// nothing).
func (l *Ledger) RememberedClass(class string) any {
	if b, ok := l.classView.get(class); ok {
		return b
	}
	return nil
}

// Remember makes the class view remember b (from RememberedClass) for
// class again, as a view whose watch has not yet delivered the class's
// latest write would still remember it.
func (l *Ledger) Remember(class string, b any) {
	l.classView.mu.Lock()
	defer l.classView.mu.Unlock()
	l.classView.bindings[class] = b.(*binding)
}
